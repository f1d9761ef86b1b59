package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	logsapi "k8s.io/component-base/logs/api/v1"
	// The json format, as kube-proxy registers it.
	_ "k8s.io/component-base/logs/json/register"
)

// applyLogging configures klog through k8s.io/component-base/logs, as
// kube-proxy does, so --v, --vmodule, --logging-format and
// --log-flush-frequency (and KubeProxyConfiguration.logging) mean the same.
// It runs once per process; `run` calls it before anything logs.
func applyLogging(c *cli.Context) error {
	lc, err := loggingConfig(c)
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(lc, nil); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	return nil
}

// loggingConfig is the flags as a LoggingConfiguration, validated as
// kube-proxy validates its own (e.g. --vmodule only with the text format).
func loggingConfig(c *cli.Context) (*logsapi.LoggingConfiguration, error) {
	lc := logsapi.NewLoggingConfiguration()
	lc.Format = c.String("logging-format")
	lc.Verbosity = logsapi.VerbosityLevel(c.Int("v"))
	lc.FlushFrequency.Duration.Duration = c.Duration("log-flush-frequency")
	lc.FlushFrequency.SerializeAsString = true
	vm, err := parseVModule(c.String("vmodule"))
	if err != nil {
		return nil, err
	}
	lc.VModule = vm
	if errs := logsapi.Validate(lc, nil, nil); len(errs) > 0 {
		return nil, fmt.Errorf("logging: %w", errs.ToAggregate())
	}
	return lc, nil
}

// parseVModule parses "pattern=N,..." as klog's -vmodule does.
func parseVModule(s string) (logsapi.VModuleConfiguration, error) {
	var out logsapi.VModuleConfiguration
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		pattern, level, ok := strings.Cut(item, "=")
		n, err := strconv.ParseUint(level, 10, 31)
		if !ok || pattern == "" || err != nil {
			return nil, fmt.Errorf("--vmodule: %q is not pattern=N", item)
		}
		out = append(out, logsapi.VModuleItem{FilePattern: pattern, Verbosity: logsapi.VerbosityLevel(n)})
	}
	return out, nil
}
