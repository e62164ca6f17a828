package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveOnlyLogicalSlots: Installer.Remove takes away a logical slot's directory, and never a
// physical slot's (a cascaded standby's, say) or one whose state file it cannot read.
func TestRemoveOnlyLogicalSlots(t *testing.T) {
	raw, err := os.ReadFile("testdata/pg15.state")
	if err != nil {
		t.Fatal(err)
	}
	logical, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	physical, _ := Parse(raw)
	physical.Database, physical.Plugin = 0, ""
	physRaw, err := physical.Encode()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	slots := map[string][]byte{"cdc": raw, "cascade": physRaw, "garbled": []byte("not a state file")}
	for name, content := range slots {
		dir := filepath.Join(data, "pg_replslot", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state"), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(data, "pg_replslot", "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := Installer{DataDir: data}
	if logical.Database == 0 {
		t.Fatal("the golden file should be a logical slot")
	}
	for name, want := range map[string]string{"cascade": "physical slot", "garbled": "cannot read"} {
		if err := in.Remove(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("remove %s: %v, want an error saying %q", name, err, want)
		}
		if _, err := os.Stat(filepath.Join(data, "pg_replslot", name, "state")); err != nil {
			t.Errorf("%s was touched: %v", name, err)
		}
	}
	for _, name := range []string{"cdc", "empty", "absent"} {
		if err := in.Remove(name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(data, "pg_replslot", name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
}
