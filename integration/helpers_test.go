package integration

import "os"

func mkdirAll(p string) error { return os.MkdirAll(p, 0o700) }

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
