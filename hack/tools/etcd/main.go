// Command etcd is the stock etcd server, built from the pinned etcd server
// module (the same thing etcd's own server/main.go does).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
