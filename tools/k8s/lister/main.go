// Command lister is the program a Go user would write to read what gates reads: client-go's
// typed clients list the built-in kinds gates reads, all at once, in protobuf (client-go's
// encoding for built-in types when asked for it, as kubectl and the controllers are), in
// pages of PAGE_SIZE (gates's default, 2000), decoding every object into its Go type and keeping them, then prints the
// elapsed seconds and the object counts. The benchmark benches/real_kube_scale.rs runs it
// beside `gates check` and one round of the same lists.
//
// Usage: lister KUBECONFIG PAGE_SIZE
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: lister KUBECONFIG PAGE_SIZE")
		os.Exit(2)
	}
	pageSize, err := strconv.ParseInt(os.Args[2], 10, 64)
	if err != nil || pageSize < 1 {
		fmt.Fprintln(os.Stderr, "PAGE_SIZE: a positive count:", os.Args[2])
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	config.ContentType = "application/vnd.kubernetes.protobuf"
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.QPS = 1000
	config.Burst = 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	lists := map[string]pager.ListPageFunc{
		"nodes": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Nodes().List(ctx, o)
		},
		"pods": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods("").List(ctx, o)
		},
		"deployments": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().Deployments("").List(ctx, o)
		},
		"daemonsets": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().DaemonSets("").List(ctx, o)
		},
		"statefulsets": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().StatefulSets("").List(ctx, o)
		},
		"poddisruptionbudgets": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.PolicyV1().PodDisruptionBudgets("").List(ctx, o)
		},
		"services": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Services("").List(ctx, o)
		},
		"leases": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoordinationV1().Leases("").List(ctx, o)
		},
	}
	started := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	var failed error
	for name, list := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pager.New(list)
			p.PageSize = pageSize
			var held []runtime.Object
			err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
				held = append(held, o)
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = fmt.Errorf("%s: %w", name, err)
			}
			counts[name] = len(held)
		}()
	}
	wg.Wait()
	elapsed := time.Since(started)
	if failed != nil {
		fmt.Fprintln(os.Stderr, failed)
		os.Exit(1)
	}
	fmt.Printf("%.3f %v\n", elapsed.Seconds(), counts)
}
