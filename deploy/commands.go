package deploy

import (
	"fmt"
	"strings"
)

// ApplyTargets turns an install block's commands (the README's) into what
// Render takes, so that the deploy check applies exactly what the commands
// name: `kubectl apply --server-side -k DIR` is DIR, and `helm install NAME
// CHART -n kube-system -f VALUES` is CHART=VALUES. A command of any other
// form is an error: the check must not skip what an operator would run.
func ApplyTargets(commands []string) ([]string, error) {
	var out []string
	for _, c := range commands {
		f := strings.Fields(c)
		switch {
		case len(f) == 5 && f[0] == "kubectl" && f[1] == "apply" && f[2] == "--server-side" && f[3] == "-k":
			out = append(out, f[4])
		case len(f) == 8 && f[0] == "helm" && f[1] == "install" && f[4] == "-n" && f[5] == "kube-system" && f[6] == "-f":
			out = append(out, f[3]+"="+f[7])
		default:
			return nil, fmt.Errorf("%q: not a command the deploy check runs (kubectl apply --server-side -k DIR, helm install NAME CHART -n kube-system -f VALUES)", c)
		}
	}
	return out, nil
}
