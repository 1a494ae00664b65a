// offhours-kube runs the Kubernetes control plane of offhours' end-to-end tests from one binary:
// kube-apiserver, kube-controller-manager, kube-scheduler, etcd, and kubectl to drive them. One binary links the shared
// dependencies once, which is what keeps a cold build inside CI's time on two cores.
//
//	offhours-kube kube-apiserver --etcd-servers=... ...
//	offhours-kube etcd --data-dir=...
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // CronJob time zones

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func run(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: offhours-kube {kube-apiserver|kube-controller-manager|kube-scheduler|etcd|kubectl} [flags]")
		os.Exit(2)
	}
	component, args := os.Args[1], os.Args[2:]
	switch component {
	case "kube-apiserver":
		os.Exit(run(apiserver.NewAPIServerCommand(), args))
	case "kube-controller-manager":
		os.Exit(run(controllermanager.NewControllerManagerCommand(), args))
	case "kube-scheduler":
		os.Exit(run(scheduler.NewSchedulerCommand(), args))
	case "kubectl":
		os.Exit(run(kubectl.NewDefaultKubectlCommand(), args))
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, args...))
	default:
		fmt.Fprintf(os.Stderr, "offhours-kube: unknown component %q\n", component)
		os.Exit(2)
	}
}
