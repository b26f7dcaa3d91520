// Command etcd is etcd v3.6 built from the Go module proxy: go.etcd.io/etcd/server/v3 cannot be
// "go install"ed because its go.mod replaces sibling modules with local paths.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
