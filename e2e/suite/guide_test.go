//go:build e2e

package suite

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// migrationGuide is where the node-by-node migration's commands are written
// for operators; the scenarios run them from there.
const migrationGuide = "docs/migrate-from-kube-proxy.md"

// RunGuide runs the commands of the guide's block name (`<!-- commands: name
// -->`) as written, NODE standing for node, each shown as the guide writes it.
// The test bed has no kubectl: each command is carried out by what does the
// same here (the cluster package's label and patch, deploy/test/apply's
// server-side apply of a kustomization, curl from the client), and a command
// of any other form fails the verdict, so the guide cannot say more than
// the scenario runs.
func (v *V) RunGuide(name, node string) {
	cmds, err := doctable.Commands(filepath.Join(guest.repo, migrationGuide), name)
	v.Must(err)
	for _, written := range cmds {
		v.runGuideCommand(written, node)
	}
}

func (v *V) runGuideCommand(written, node string) {
	f := strings.Fields(written)
	for i := range f {
		f[i] = strings.ReplaceAll(f[i], "NODE", node)
	}
	nodes := []string{node}
	switch {
	// kubectl label node --all|NODE KEY=VALUE [--overwrite], or KEY- (the label removed)
	case len(f) >= 5 && f[0] == "kubectl" && f[1] == "label" && f[2] == "node" && (len(f) == 5 || len(f) == 6 && f[5] == "--overwrite"):
		if f[3] == "--all" {
			nodes = []string{"node1", "node2"}
		} else if f[3] != node {
			break
		}
		key, value, ok := strings.Cut(f[4], "=")
		if !ok {
			if key, ok = strings.CutSuffix(f[4], "-"); !ok || len(f) != 5 {
				break
			}
		}
		for _, n := range nodes {
			v.LabelNode(n, key, value)
		}
		v.Show("-", written, "")
		return
	// kubectl -n NS patch daemonset NAME --patch-file FILE
	case len(f) == 8 && f[0] == "kubectl" && f[1] == "-n" && f[3] == "patch" && f[4] == "daemonset" && f[6] == "--patch-file":
		v.PatchDaemonSet(f[2], f[5], f[7])
		v.Show("-", written, "")
		return
	// kubectl apply [--server-side] -k DIR: a server-side apply of the rendered kustomization.
	case len(f) == 4 && f[0] == "kubectl" && f[1] == "apply" && f[2] == "-k":
		v.applyKustomization(written, f[3])
		return
	case len(f) == 5 && f[0] == "kubectl" && f[1] == "apply" && f[2] == "--server-side" && f[3] == "-k":
		v.applyKustomization(written, f[4])
		return
	// kubectl -n NS get pods -o wide --field-selector spec.nodeName=NODE
	case len(f) == 9 && f[0] == "kubectl" && f[1] == "-n" && f[3] == "get" && f[4] == "pods" && f[5] == "-o" && f[6] == "wide" &&
		f[7] == "--field-selector" && f[8] == "spec.nodeName="+node:
		ctx, cancel := v.s.ctx()
		defer cancel()
		pods, err := guest.client.CoreV1().Pods(f[2]).List(ctx, metav1.ListOptions{FieldSelector: f[8]})
		v.Must(err)
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name+" "+string(p.Status.Phase))
		}
		// No kubelet runs here: the list is empty, the proxier runs as a process.
		v.Show("-", written, strings.Join(names, "\n"))
		return
	// curl http://NODE:10256/readyz, from outside the node.
	case len(f) == 2 && f[0] == "curl" && f[1] == "http://"+node+":10256/readyz":
		addr := map[string]string{"node1": node1Addr, "node2": node2Addr}[node]
		a := run("client", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+addr+":10256/readyz")
		v.Show("client", written, a.Out)
		if a.Out != "200" {
			v.Errorf("%s: %s, want 200", written, a.Out)
		}
		return
	}
	v.Errorf("the migration guide's command %q is not one this scenario can run: change the guide or teach runGuideCommand", written)
}

// applyKustomization server-side applies the kustomization dir (as
// `kubectl apply --server-side -k` does, through deploy/test/apply, which
// run.sh builds on the host) and puts the ipvsproxy DaemonSet back when the
// scenario ends.
func (v *V) applyKustomization(written, dir string) {
	tool := os.Getenv("E2E_APPLY")
	if tool == "" {
		v.Errorf("%s: E2E_APPLY (deploy/test/apply, built by e2e/run.sh) is not set", written)
		return
	}
	ctx, cancel := v.s.ctx()
	defer cancel()
	old, err := guest.client.AppsV1().DaemonSets("kube-system").Get(ctx, "ipvsproxy", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		old, err = nil, nil
	}
	v.Must(err)
	t := v.s.t
	t.Cleanup(func() {
		if err := restoreDaemonSet("kube-system", "ipvsproxy", old); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
	cmd := exec.CommandContext(context.Background(), tool, "-kubeconfig", os.Getenv("ADMIN_KUBECONFIG"), "-rbac-doc", "", dir)
	cmd.Dir = guest.repo
	out, err := cmd.CombinedOutput()
	v.Show("-", written, strings.TrimSpace(string(out)))
	if err != nil {
		v.Errorf("%s: %v", written, err)
	}
}
