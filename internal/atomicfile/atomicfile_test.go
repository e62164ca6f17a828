package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds the last data written, and no temporary file is left; a directory
// that cannot be written leaves the old file as it was.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	for _, data := range []string{"one\n", "two\n"} {
		if err := Write(dir, "state.json", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if os.Geteuid() == 0 {
		return // root writes anywhere
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if err := Write(dir, "state.json", []byte("three\n")); err == nil {
		t.Fatal("wrote into a read-only directory")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "state.json")); string(got) != "two\n" {
		t.Fatalf("the old file changed: %q", got)
	}
}
