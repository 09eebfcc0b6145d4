// Command etcd is the upstream etcd server, built from the Go module proxy.
// `go install go.etcd.io/etcd/...` does not work (its go.mod has replace
// directives), so this wrapper calls the same entrypoint as etcd's main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
