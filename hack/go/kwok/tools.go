//go:build tools

// Package tools pins kwok's controller (sigs.k8s.io/kwok/cmd/kwok) in this
// module's go.mod/go.sum, so hack/build.sh kwok builds it from the module proxy.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
