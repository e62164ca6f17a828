package main

import (
	"strings"
	"testing"
)

func TestPlot(t *testing.T) {
	in := "x\n    bench_test.go:1: lag-samples-ms 1s busy slotsync: 7\n    bench_test.go:1: lag-samples-ms 1s busy slotsync: 40 42 51\n    bench_test.go:2: lag-samples-ms 1s busy postgres: 180 190 0\n"
	all, err := read(strings.NewReader(in))
	if err != nil || len(all) != 2 || len(all[0].ms) != 3 || all[1].ms[0] != 1 || all[1].ms[2] != 190 {
		t.Fatalf("%+v %v", all, err)
	}
	var b strings.Builder
	if err := draw(&b, all); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "<polyline") != 2 || !strings.Contains(b.String(), "1s busy") {
		t.Fatalf("svg:\n%s", b.String())
	}
}
