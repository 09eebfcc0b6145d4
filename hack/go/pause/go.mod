module helmr.dev/hack/pause

go 1.24
