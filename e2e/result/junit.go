package result

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"

	"github.com/upgradelab/upgradelab/e2e/check"
)

// JUnitFile is the JUnit report's name in an artifacts folder.
const JUnitFile = "junit.xml"

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes results as JUnit XML: one test case per run (named
// by Key, classed by provider), a failure per broken rule, an error for
// a run that stopped early, and every rule's verdict in the case's
// output, so a CI that reads JUnit shows what `make e2e`'s report shows.
func WriteJUnit(path string, results []Result) error {
	suite := junitSuite{Name: "upgradelab"}
	for _, r := range results {
		c := junitCase{Name: r.Key(), Classname: r.Provider, Time: r.Duration.Seconds(), SystemOut: "rules: " + check.Summary(r.Checks)}
		if r.Error != "" {
			c.Error = &junitFailure{Message: "the run stopped early", Text: r.Error}
			suite.Errors++
		}
		if broken := check.Failed(r.Checks); len(broken) > 0 {
			var lines []string
			for _, v := range broken {
				lines = append(lines, v.String())
			}
			c.Failure = &junitFailure{Message: fmt.Sprintf("%d violation(s) of the rules", len(broken)), Text: strings.Join(lines, "\n")}
			suite.Failures++
		}
		suite.Tests++
		suite.Time += r.Duration.Seconds()
		suite.Cases = append(suite.Cases, c)
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), b...), 0o644)
}
