package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Preamble is lua/preamble.lua, which every decision script (the store's, region's)
// starts with. Safe for concurrent use.
func Preamble() string { return preamble }

// DecideFunction is decide(KEYS, ARGV, now, cost, peek) of algorithm a, the one copy of
// its decision in Lua (lua/<a>.lua), for the store's and region's scripts. Safe for
// concurrent use.
func DecideFunction(a limiter.Algorithm) (string, error) {
	values, err := decideValues(a)
	if err != nil {
		return "", err
	}
	return values + "local function decide(KEYS, ARGV, now, cost, peek)\n" +
		"  return {decide_values(KEYS, ARGV, now, cost, peek)}\nend\n", nil
}

// decideValues is decide_values: decide's table as values, for the batch script's reply.
func decideValues(a limiter.Algorithm) (string, error) {
	body, err := algorithmSection(a, "decide")
	if err != nil {
		return "", err
	}
	return "local function decide_values(KEYS, ARGV, now, cost, peek)\n" + body + "end\n", nil
}

// algorithmSection is the section name of lua/<a>.lua: the lines after "--- name" up
// to the next such line.
func algorithmSection(a limiter.Algorithm, name string) (string, error) {
	file := "lua/" + string(a) + ".lua"
	src, err := luaFiles.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("script for %s: %w", a, err)
	}
	_, rest, found := strings.Cut("\n"+string(src), "\n"+sectionMark+name+"\n")
	if !found {
		return "", fmt.Errorf("script for %s: %s has no line %q", a, file, sectionMark+name)
	}
	if i := strings.Index(rest, "\n"+sectionMark); i >= 0 {
		rest = rest[:i+1]
	}
	return rest, nil
}

const sectionMark = "--- "

//go:embed lua/preamble.lua
var preamble string

type script struct {
	src string
	sha string
	// srcArg and shaArg are boxed once, so that a command does not allocate.
	srcArg, shaArg any
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	return script{src: src, sha: sha, srcArg: src, shaArg: sha}
}

type algScripts struct {
	spec         *limiter.AlgorithmSpec
	single       script
	batch        script
	keySuffixes  []string // spec.KeySuffixes(), copied once
	nkeys, nargs int      // one decision's
}

// maxKeys and maxArgs size a request's arrays (see loadScripts).
const (
	maxKeys = 2
	maxArgs = 9
)

//go:generate go test -run ^TestGeneratedScriptsAreCurrent$ -update .

// generatedFiles are written by scripts_gen_test.go.
//
//go:embed lua/generated/*.lua
var generatedFiles embed.FS

func loadScripts() ([limiter.NumAlgorithms]algScripts, error) {
	var all [limiter.NumAlgorithms]algScripts
	for _, spec := range limiter.AlgorithmSpecs() {
		sc := algScripts{spec: spec, keySuffixes: spec.KeySuffixes(), nkeys: spec.NumKeys(), nargs: spec.NumParams() + 2}
		if err := readGenerated(spec.Algorithm(), decideKinds[:], &sc.single, &sc.batch); err != nil {
			return all, err
		}
		if sc.nkeys > maxKeys || sc.nargs > maxArgs {
			return all, fmt.Errorf("script for %s: %d keys and %d arguments, more than the %d and %d a request holds", spec, sc.nkeys, sc.nargs, maxKeys, maxArgs)
		}
		all[spec.Index()] = sc
	}
	return all, nil
}

// Kinds of script in lua/generated: decisions, reservations, leases (limiter.Concurrency's).
var (
	decideKinds  = [2]string{"single", "batch"}
	reserveKinds = [4]string{"reserve", "settle", "reserve_batch", "renew"}
	leaseKinds   = [4]string{"acquire", "release", "batch", "renew"}
)

func readGenerated(a limiter.Algorithm, kinds []string, dst ...*script) error {
	for i, kind := range kinds {
		b, err := generatedFiles.ReadFile(generatedPath(a, kind))
		if err != nil {
			return fmt.Errorf("script for %s: %w", a, err)
		}
		*dst[i] = newScript(string(b))
	}
	return nil
}

func generatedPath(a limiter.Algorithm, kind string) string {
	return "lua/generated/" + string(a) + "." + kind + ".lua"
}

// argsInto appends a decision's ARGV: the algorithm's parameters, cost and mode.
func argsInto(dst []int64, spec *limiter.AlgorithmSpec, key string, lim limiter.Limit, cost int64, mode limiter.Mode) []int64 {
	return append(spec.AppendParams(dst, key, lim), cost, int64(mode))
}
