package sideplot

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDrawsOnlyPositiveValues(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.png")
	drawn, err := Draw("t", "s", map[string][]Point{"ipvsproxy": {{1000, 0}}, "kube-proxy-nftables": {{1000, -1}}}, file)
	if err != nil || drawn {
		t.Fatalf("drawn %v, err %v; want nothing drawn for no positive value", drawn, err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a file was written for an empty chart")
	}
	drawn, err = Draw("t", "s", map[string][]Point{"ipvsproxy": {{10000, 2}, {1000, 1}}, "someone": {{1000, 3}}}, file)
	if err != nil || !drawn {
		t.Fatalf("drawn %v, err %v", drawn, err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Errorf("no PNG written: %v", err)
	}
}
