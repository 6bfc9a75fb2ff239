// Command controlplane is the upstream Kubernetes control plane of draguard's cluster tests in one
// multi-call binary: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl,
// each exactly as its upstream main() builds it, at the release pinned in go.mod. One binary links
// once (the five share most of their packages), which keeps the cold build of the harness short.
//
// The component is chosen by the name the binary is called by (a symlink named kubectl runs
// kubectl) or by the first argument: `controlplane kube-apiserver --etcd-servers=...`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // for timeZone support in CronJob, as kube-apiserver's and kcm's main import it

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage: controlplane COMPONENT [FLAGS...]   (or call it by a symlink named COMPONENT)
components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, free-port
`

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args
	if name == "controlplane" {
		if len(os.Args) < 2 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		name = os.Args[1]
		args = os.Args[1:]
	}
	os.Args = args
	switch name {
	case "etcd":
		os.Exit(runEtcd(args[1:]))
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "free-port":
		os.Exit(runFreePort())
	case "kubectl":
		runKubectl()
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown component %q\n%s", name, usage)
		os.Exit(2)
	}
}

// runKubectl is cmd/kubectl's main().
func runKubectl() {
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
}
