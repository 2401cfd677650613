//go:build e2e

package upstream

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// specResult is one CAPI spec's outcome on one provider.
type specResult struct {
	Provider string        `json:"provider"`
	Spec     string        `json:"spec"`
	State    string        `json:"state"`
	Duration time.Duration `json:"durationNanoseconds"`
	Process  int           `json:"process"`
	// Failure is where and why it failed: CAPI's own assertion message.
	Failure string `json:"failure,omitempty"`
}

type summary struct {
	Results []specResult `json:"results"`
	Total   time.Duration
}

// summarize keeps each spec's It (CAPI's specs have one each; the
// BeforeEach and AfterEach, the namespace and the cleanup, count in its
// time, as Ginkgo reports it).
func summarize(r Report) summary {
	s := summary{Total: r.RunTime}
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt || sr.State == types.SpecStateSkipped {
			continue
		}
		texts := sr.ContainerHierarchyTexts
		if len(texts) < 2 {
			continue
		}
		res := specResult{Provider: texts[0], Spec: texts[1], State: sr.State.String(), Duration: sr.RunTime, Process: sr.ParallelProcess}
		if sr.State.Is(types.SpecStateFailureStates) {
			res.Failure = strings.TrimSpace(sr.Failure.Message)
			if len(res.Failure) > 600 {
				res.Failure = res.Failure[:600] + "..."
			}
			res.Failure += " (" + sr.Failure.Location.String() + ")"
		}
		s.Results = append(s.Results, res)
	}
	sort.Slice(s.Results, func(i, j int) bool {
		if s.Results[i].Spec != s.Results[j].Spec {
			return s.Results[i].Spec < s.Results[j].Spec
		}
		return s.Results[i].Provider < s.Results[j].Provider
	})
	return s
}

// Text is one line per spec and provider with its wall time, then the
// failures.
func (s summary) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CAPI's e2e specs (sigs.k8s.io/cluster-api/test/e2e), %d runs in %s:\n", len(s.Results), s.Total.Round(time.Second))
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SPEC\tPROVIDER\tRESULT\tWALL TIME\tPROCESS")
	for _, r := range s.Results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", r.Spec, r.Provider, r.State, r.Duration.Round(100*time.Millisecond), r.Process)
	}
	w.Flush()
	for _, r := range s.Results {
		if r.Failure != "" {
			fmt.Fprintf(&b, "\n%s on %s failed: %s\n", r.Spec, r.Provider, r.Failure)
		}
	}
	return b.String()
}

// Write keeps it as summary.txt and results.json in dir.
func (s summary) Write(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(s.Text()), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
}
