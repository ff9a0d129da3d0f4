// Command render-chart prints what the Helm chart of rl-exporter renders,
// as helm template does, without helm and without a cluster: make chart
// runs it (make chart VALUES=file.yaml with a values file).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	deploytest "github.com/rl-exporter/rl-exporter/deploy/test"
)

func main() {
	chart := flag.String("chart", "../helm/rl-exporter", "the chart's directory")
	values := flag.String("values", "", "a values file (default: the chart's values)")
	apis := flag.String("api-versions", "", "API versions the cluster serves beyond Helm's defaults, comma-separated (monitoring.coreos.com/v1 renders the ServiceMonitor and PrometheusRule)")
	flag.Parse()
	// Helm's loader logs each symbolic link it follows: the chart's
	// files/prometheusrule.yaml is one, to the generated PrometheusRule.
	log.SetOutput(io.Discard)
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "render-chart: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	var vals []byte
	if *values != "" {
		b, err := os.ReadFile(*values)
		if err != nil {
			fmt.Fprintf(os.Stderr, "render-chart: %v\n", err)
			os.Exit(1)
		}
		vals = b
	}
	var versions []string
	if *apis != "" {
		versions = strings.Split(*apis, ",")
	}
	out, err := deploytest.Render(*chart, vals, versions)
	if err == nil {
		err = deploytest.WriteManifests(os.Stdout, out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "render-chart: %v\n", err)
		os.Exit(1)
	}
}
