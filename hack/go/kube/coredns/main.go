// Command coredns is CoreDNS with only the plugins of the local cluster's
// Corefile (hack/coredns.sh). Upstream's main links every plugin, and with
// them every cloud provider's SDK (route53, azure, clouddns) and etcd's
// client: most of a cold build, for plugins this cluster never runs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins above in upstream's order (its plugin.cfg), the
// order a query passes through them whatever order the Corefile names them in.
var directives = []string{
	"ready", "health", "errors", "loadbalance", "cache", "kubernetes", "loop", "forward",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
