package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeproxyconfig"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// --config: a KubeProxyConfiguration read into the flags of `run`
// (internal/daemon/kubeproxyconfig translates it), unless a flag was given
// explicitly (on the command line or as IPVSPROXY_*).

// configFileResult is what applying a file did, for the start-up log.
type configFileResult struct {
	// Ignored names each field set in the file that ipvsproxy does not
	// honour, with why.
	Ignored []string
	// Overridden names fields whose flag was given explicitly.
	Overridden []string
	// Unknown names the fields this build does not know (a newer
	// kube-proxy's or kubeadm's), with the known field each is closest to.
	Unknown []string
}

// applyConfigFile sets every flag the file decides and the command line does
// not. kube-proxy lets only --hostname-override and the logging flags win
// over its file and ignores the rest; here every flag given explicitly wins,
// which is the same for kube-proxy's own DaemonSet (--config and
// --hostname-override) and lets an operator try a setting on one node.
func applyConfigFile(c *cli.Context, file *kubeproxy.KubeProxyConfiguration) (configFileResult, error) {
	var r configFileResult
	known := map[string]bool{}
	for _, f := range c.Command.Flags {
		for _, name := range f.Names() {
			known[name] = true
		}
	}
	for _, s := range kubeproxyconfig.Translate(file) {
		switch {
		case s.Flag == "":
			r.Ignored = append(r.Ignored, fmt.Sprintf("%s=%s (%s)", s.Path, s.Value, s.Why))
		case !known[s.Flag]:
			// A flag of `run` that this command (cleanup) does not read.
		case c.IsSet(s.Flag):
			r.Overridden = append(r.Overridden, fmt.Sprintf("%s by --%s", s.Path, s.Flag))
		default:
			if err := c.Set(s.Flag, s.Value); err != nil {
				return r, fmt.Errorf("--config: %s=%q as --%s: %w", s.Path, s.Value, s.Flag, err)
			}
		}
	}
	return r, nil
}

// loadConfigFile applies --config, if given, and logs one warning naming
// the fields it ignores and one naming the fields this build does not know.
func loadConfigFile(c *cli.Context) (configSource, error) {
	path := c.String("config")
	if path == "" {
		return configSource{}, nil
	}
	source := configSource{path: path, modeFromFlag: c.IsSet("proxy-mode")}
	file, err := kubeproxyconfig.Read(path)
	if err == nil {
		err = source.checkMode(file)
	}
	if err != nil {
		return configSource{}, err
	}
	source.sum = file.Sum
	r, err := applyConfigFile(c, file.Config)
	if err != nil {
		return configSource{}, err
	}
	for _, u := range file.Unknown {
		r.Unknown = append(r.Unknown, u.String())
	}
	if len(r.Unknown) > 0 {
		klog.Warningf("--config %s: this build of ipvsproxy does not know these KubeProxyConfiguration fields and ignores them (a newer kube-proxy's or kubeadm's, or misspelt): %s", path, strings.Join(r.Unknown, "; "))
	}
	if len(r.Ignored) > 0 {
		klog.Warningf("--config %s: ipvsproxy does not honour these KubeProxyConfiguration fields: %s", path, strings.Join(r.Ignored, "; "))
	}
	if len(r.Overridden) > 0 {
		klog.InfoS("Flags given explicitly override the configuration file", "file", path, "fields", r.Overridden)
	}
	source.applied = r
	return source, nil
}

// errConfigChanged ends `run` so that main starts it again from the file.
var errConfigChanged = errors.New("the configuration file changed")

// configSource is the file the running configuration came from, so that a
// watcher can tell when it changes, and judge the new content as start-up
// does.
type configSource struct {
	path    string
	sum     [sha256.Size]byte
	applied configFileResult
	// modeFromFlag: --proxy-mode was given, so the file's mode is not read.
	modeFromFlag bool
}

// checkMode refuses a file whose mode is not ipvs, unless --proxy-mode
// overrides it.
func (s configSource) checkMode(file *kubeproxyconfig.File) error {
	if s.modeFromFlag {
		return nil
	}
	if err := kubeproxyconfig.CheckMode(string(file.Config.Mode)); err != nil {
		return fmt.Errorf("--config %s: mode: %w; set it to ipvs, or run with --proxy-mode=ipvs, which wins over the file and leaves its mode to the kube-proxy that reads it too (deploy/overlays/kubeadm does)", s.path, err)
	}
	return nil
}

// accepts says whether content read from the file would start: it decodes
// and its mode is accepted.
func (s configSource) accepts(data []byte) error {
	file, err := kubeproxyconfig.Decode(data)
	if err != nil {
		return err
	}
	return s.checkMode(file)
}

// loadConfig reads --config into the flags, then the flags into a Config:
// what `run` and `cleanup` start from.
func loadConfig(c *cli.Context) (ipvsproxy.Config, configSource, error) {
	source, err := loadConfigFile(c)
	if err != nil {
		return ipvsproxy.DefaultConfig(), source, err
	}
	cfg, err := configFromFlags(c)
	return cfg, source, err
}
