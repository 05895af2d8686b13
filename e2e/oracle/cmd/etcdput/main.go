// Command etcdput writes JSON objects straight into the etcd of a throw-away test cluster,
// bypassing API-server validation. The cross-check scripts use it to hand the real
// kube-controller-manager policies the API server would refuse to create (non-bool expressions,
// syntax errors), because the status controller type-checks whatever is stored.
//
// usage: etcdput -endpoint http://127.0.0.1:23791 [-list <prefix>] < lines of {"key": ..., "value": <object>}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:2379", "etcd client URL")
	list := flag.String("list", "", "print the keys under this prefix and exit")
	flag.Parse()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cli.Close()
	ctx := context.Background()
	if *list != "" {
		resp, err := cli.Get(ctx, *list, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, kv := range resp.Kvs {
			fmt.Println(string(kv.Key))
		}
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	n := 0
	for {
		line, rerr := in.ReadBytes('\n')
		if len(line) > 1 {
			var rec struct {
				Key   string          `json:"key"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				fmt.Fprintln(os.Stderr, "bad line:", err)
				os.Exit(1)
			}
			if _, err := cli.Put(ctx, rec.Key, string(rec.Value)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			n++
		}
		if rerr != nil {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "etcdput: %d objects written\n", n)
}
