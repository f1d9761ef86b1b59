package proxier

import (
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// iptables.masqueradeBit 13 (--iptables-masquerade-bit=13) marks and
// matches 0x2000 everywhere, and the default bit 14 appears nowhere.
func TestMasqueradeBitInRules(t *testing.T) {
	cfg := testConfig()
	cfg.MasqueradeMark = 1 << 13
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		rules := rules.IPTables(cfg, family, ipvsproxy.NewLocalDetector(cfg, family, nil))
		if strings.Contains(rules, "0x4000") || !strings.Contains(rules, "0x2000/0x2000") {
			t.Errorf("%s rules with bit 13:\n%s", family, rules)
		}
	}
}
