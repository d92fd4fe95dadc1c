// Command proxmox-check calls the Proxmox VE API through go-proxmox, a Go client nobody here
// wrote, and prints what it got as JSON, so the lab's tests check the lab against it.
//
// Usage: proxmox-check -url URL -token-id ID -secret-file FILE -ca-file FILE -node NAME
//
//	[-vmid N] [-calls version,nodes,node-status,permissions,vm,tasks,stop]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// result is one call's outcome: "ok", or the client's error text.
type result struct {
	Call   string `json:"call"`
	Error  string `json:"error,omitempty"`
	Data   any    `json:"data,omitempty"`
	Millis int64  `json:"millis"`
}

func main() {
	base := flag.String("url", "", "API base, https://host:8006/api2/json")
	tokenID := flag.String("token-id", "", "API token id (user@realm!name)")
	secretFile := flag.String("secret-file", "", "file holding the token secret")
	caFile := flag.String("ca-file", "", "CA certificate (PEM) the hosts' certificates chain to")
	node := flag.String("node", "", "node to ask about")
	vmid := flag.Int("vmid", 0, "VM to read (and stop, with the stop call)")
	timeout := flag.Duration("timeout", 20*time.Second, "per-call timeout")
	calls := flag.String("calls", "version,nodes,node-status,permissions,vm,tasks", "calls to make, comma-separated")
	flag.Parse()

	secret, err := os.ReadFile(*secretFile)
	if err != nil {
		fail("secret: %v", err)
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail("ca: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail("ca: no certificate in %s", *caFile)
	}
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	c := proxmox.NewClient(*base,
		proxmox.WithHTTPClient(httpClient),
		proxmox.WithAPIToken(*tokenID, strings.TrimSpace(string(secret))),
	)

	var results []result
	for _, name := range strings.Split(*calls, ",") {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		started := time.Now()
		data, err := call(ctx, c, name, *node, *vmid)
		cancel()
		r := result{Call: name, Data: data, Millis: time.Since(started).Milliseconds()}
		if err != nil {
			r.Error = err.Error()
			r.Data = nil
		}
		results = append(results, r)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(results); err != nil {
		os.Exit(2)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "proxmox-check: "+format+"\n", args...)
	os.Exit(2)
}

func call(ctx context.Context, c *proxmox.Client, name, node string, vmid int) (any, error) {
	switch name {
	case "version":
		v, err := c.Version(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]string{"version": v.Version, "release": v.Release}, nil
	case "nodes":
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		var out []map[string]any
		for _, n := range nodes {
			out = append(out, map[string]any{"node": n.Node, "status": n.Status, "maxmem": n.MaxMem, "maxcpu": n.MaxCPU, "uptime": n.Uptime})
		}
		return out, nil
	case "node-status":
		n, err := c.Node(ctx, node)
		if err != nil {
			return nil, err
		}
		return map[string]any{"uptime": n.Uptime, "cpus": n.CPUInfo.CPUs, "memory_total": n.Memory.Total, "pveversion": n.PVEVersion, "kversion": n.Kversion}, nil
	case "permissions":
		p, err := c.Permissions(ctx, nil)
		if err != nil {
			return nil, err
		}
		return p, nil
	case "vm":
		n := (&proxmox.Node{}).New(c, node)
		vm, err := n.VirtualMachine(ctx, vmid)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": vm.Name, "status": vm.Status, "qmpstatus": vm.QMPStatus, "uptime": vm.Uptime}, nil
	case "tasks":
		n := (&proxmox.Node{}).New(c, node)
		tasks, err := n.Tasks(ctx, &proxmox.NodeTasksOptions{Limit: 20})
		if err != nil {
			return nil, err
		}
		var out []map[string]any
		for _, t := range tasks {
			out = append(out, map[string]any{"upid": string(t.UPID), "type": t.Type, "id": t.ID, "status": t.Status, "exitstatus": t.ExitStatus, "seconds": t.Duration.Seconds()})
		}
		return out, nil
	case "stop":
		n := (&proxmox.Node{}).New(c, node)
		vm, err := n.VirtualMachine(ctx, vmid)
		if err != nil {
			return nil, err
		}
		started := time.Now()
		task, err := vm.Stop(ctx)
		if err != nil {
			return nil, err
		}
		if err := task.Wait(ctx, 200*time.Millisecond, 30*time.Second); err != nil {
			return nil, err
		}
		return map[string]any{"upid": string(task.UPID), "exitstatus": task.ExitStatus, "successful": task.IsSuccessful, "seconds": time.Since(started).Seconds()}, nil
	default:
		return nil, fmt.Errorf("unknown call %q", name)
	}
}
