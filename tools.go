//go:build tools

// Package tools pins the modules the product is built on before every package
// imports them, so parallel work on separate packages shares one go.sum.
package tools

import (
	_ "github.com/moby/ipvs"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/ti-mo/conntrack"
	_ "github.com/urfave/cli/v2"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/discovery/v1"
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/klog/v2"
)
