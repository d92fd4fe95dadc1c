// Command talos-check calls the Talos API through the official Talos Go client library (the
// machinery client talosctl itself uses) and prints what each call answered as JSON. The
// lab's tests run it against the lab, so the lab is checked against code nobody here wrote.
//
// Usage: talos-check -talosconfig FILE -context NAME -endpoint IP [-timeout 5s] [-calls a,b]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/status"
)

// result is one call's outcome: the gRPC code name ("OK" on success), its message, what it
// returned, and how long it took.
type result struct {
	Call    string `json:"call"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	Data    any    `json:"data,omitempty"`
	Millis  int64  `json:"millis"`
}

const addressStatuses = "AddressStatuses.net.talos.dev"

func main() {
	talosconfig := flag.String("talosconfig", "", "talosconfig file")
	contextName := flag.String("context", "", "talosconfig context")
	endpoint := flag.String("endpoint", "", "the one endpoint to call")
	timeout := flag.Duration("timeout", 5*time.Second, "per-call timeout")
	calls := flag.String("calls", "version,etcd-members,etcd-status,services,addresses,id-query,unsupported-type,unsupported-namespace,cosi-nodes", "calls to make, comma-separated")
	flag.Parse()
	if *talosconfig == "" || *contextName == "" || *endpoint == "" {
		fmt.Fprintln(os.Stderr, "talos-check: -talosconfig, -context and -endpoint are required")
		os.Exit(2)
	}

	ctx := context.Background()
	c, err := client.New(ctx,
		client.WithConfigFromFile(*talosconfig),
		client.WithContextName(*contextName),
		client.WithEndpoints(*endpoint),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "talos-check: client: %v\n", err)
		os.Exit(2)
	}
	defer c.Close() //nolint:errcheck

	var results []result
	for _, name := range strings.Split(*calls, ",") {
		callCtx, cancel := context.WithTimeout(ctx, *timeout)
		started := time.Now()
		data, err := call(callCtx, c, name, *endpoint)
		cancel()
		r := result{Call: name, Code: "OK", Data: data, Millis: time.Since(started).Milliseconds()}
		if err != nil {
			st, _ := status.FromError(err)
			r.Code = st.Code().String()
			r.Message = st.Message()
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

func call(ctx context.Context, c *client.Client, name, endpoint string) (any, error) {
	switch name {
	case "version":
		resp, err := c.Version(ctx)
		if err != nil {
			return nil, err
		}
		var tags []string
		for _, m := range resp.Messages {
			tags = append(tags, m.GetVersion().GetTag())
		}
		return tags, nil
	case "etcd-members":
		resp, err := c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{QueryLocal: true})
		if err != nil {
			return nil, err
		}
		var hosts []string
		for _, m := range resp.Messages {
			for _, member := range m.Members {
				hosts = append(hosts, member.Hostname)
			}
		}
		return hosts, nil
	case "etcd-status":
		resp, err := c.EtcdStatus(ctx)
		if err != nil {
			return nil, err
		}
		var out []map[string]string
		for _, m := range resp.Messages {
			s := m.GetMemberStatus()
			out = append(out, map[string]string{
				"member": fmt.Sprintf("%x", s.GetMemberId()),
				"leader": fmt.Sprintf("%x", s.GetLeader()),
			})
		}
		return out, nil
	case "services":
		resp, err := c.ServiceList(ctx)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, m := range resp.Messages {
			for _, s := range m.Services {
				ids = append(ids, s.Id)
			}
		}
		return ids, nil
	case "addresses":
		return list(ctx, c, "network", addressStatuses)
	case "id-query":
		return list(ctx, c, "network", addressStatuses, state.WithIDQuery(resource.IDRegexpMatch(regexp.MustCompile("^eth0/"))))
	case "unsupported-type":
		return list(ctx, c, "network", "Nonsense.example.com")
	case "unsupported-namespace":
		return list(ctx, c, "nowhere", addressStatuses)
	case "cosi-nodes":
		// talosctl get with --nodes sets `nodes`; apid proxies COSI one-to-one only.
		return list(client.WithNodes(ctx, endpoint), c, "network", addressStatuses)
	default:
		return nil, fmt.Errorf("unknown call %q", name)
	}
}

// list is COSI State List with the YAML specs kept as they are (talosctl get does the same).
func list(ctx context.Context, c *client.Client, namespace, typ string, opts ...state.ListOption) (any, error) {
	opts = append(opts, state.WithListUnmarshalOptions(state.WithSkipProtobufUnmarshal()))
	items, err := c.COSI.List(ctx, resource.NewMetadata(namespace, typ, "", resource.VersionUndefined), opts...)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, r := range items.Items {
		ids = append(ids, r.Metadata().ID())
	}
	return ids, nil
}
