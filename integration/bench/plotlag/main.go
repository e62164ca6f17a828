// Command plotlag draws the sync lag distributions that BenchmarkSyncLag prints (lines
// "lag-samples-ms <interval> <rhythm> <who>: <ms> ...") as an SVG of cumulative distributions,
// one panel per run, slotsync beside PostgreSQL's own slot sync, on a logarithmic time axis.
//
//	go test ./integration/bench/ -run XXX -bench SyncLag -benchtime 40x | go run ./integration/bench/plotlag > docs/lag.svg
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

type series struct {
	run, who string
	ms       []float64
}

func main() {
	all, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plotlag:", err)
		os.Exit(1)
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "plotlag: no lag-samples-ms lines on stdin (run BenchmarkSyncLag)")
		os.Exit(1)
	}
	if err := draw(os.Stdout, all); err != nil {
		fmt.Fprintln(os.Stderr, "plotlag:", err)
		os.Exit(1)
	}
}

func read(r io.Reader) ([]series, error) {
	var out []series
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "lag-samples-ms ")
		if i < 0 {
			continue
		}
		head, nums, ok := strings.Cut(line[i+len("lag-samples-ms "):], ":")
		f := strings.Fields(head)
		if !ok || len(f) != 3 {
			continue
		}
		s := series{run: f[0] + " " + f[1], who: f[2]}
		for _, n := range strings.Fields(nums) {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return nil, fmt.Errorf("sample %q: %w", n, err)
			}
			s.ms = append(s.ms, math.Max(v, 1))
		}
		sort.Float64s(s.ms)
		// A benchmark prints its samples once per round (b.N = 1 first): the last round counts.
		replaced := false
		for i := range out {
			if out[i].run == s.run && out[i].who == s.who {
				out[i], replaced = s, true
			}
		}
		if !replaced {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func draw(w io.Writer, all []series) error {
	var runs []string
	byRun := map[string][]series{}
	for _, s := range all {
		if _, ok := byRun[s.run]; !ok {
			runs = append(runs, s.run)
		}
		byRun[s.run] = append(byRun[s.run], s)
	}
	const pw, ph, pad = 360, 220, 50
	width, height := len(runs)*(pw+pad)+pad, ph+2*pad+20
	colors := map[string]string{"slotsync": "#1f77b4", "postgres": "#d62728"}
	x := func(ms float64) float64 { return math.Log10(ms) / 5 * pw } // 1 ms .. 100 s
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">Sync lag, cumulative share of samples (blue: slotsync, red: PostgreSQL's own slot sync)</text>`+"\n", pad)
	for i, run := range runs {
		ox, oy := pad+i*(pw+pad), pad
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)"><text x="0" y="-8">%s</text>`, ox, oy, run)
		fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="none" stroke="#999"/>`, pw, ph)
		for e := 0; e <= 5; e++ {
			tx := float64(e) / 5 * pw
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
				tx, 0, tx, ph, tx, ph+14, []string{"1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"}[e])
		}
		for _, s := range byRun[run] {
			var pts []string
			for j, v := range s.ms {
				y := ph - float64(j+1)/float64(len(s.ms))*ph
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y))
			}
			color := colors[s.who]
			if color == "" {
				color = "#555"
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
