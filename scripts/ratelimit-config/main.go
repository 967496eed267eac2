// The envoyproxy/ratelimit service's own configuration loader (its src/config, copied from a checkout at build time,
// never into this repository) run on each file named, for scripts/ratelimit-config-check.ts: prints one JSON line
// per file, the loader's verdict ("accept") or its panic's message ("refuse").
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"strings"

	pb_struct "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/stats"
)

func verdict(file string) (out map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			out = map[string]string{"file": file, "verdict": "refuse", "why": fmt.Sprint(r)}
		}
	}()
	text, err := ioutil.ReadFile(file)
	if err != nil {
		return map[string]string{"file": file, "verdict": "refuse", "why": err.Error()}
	}
	root := config.ConfigFileContentToYaml(file, string(text))
	loader := config.NewRateLimitConfigLoaderImpl()
	loader.Load([]config.RateLimitConfigToLoad{{Name: file, ConfigYaml: root}}, stats.Nothing{}, false)
	return map[string]string{"file": file, "verdict": "accept"}
}

// lookup prints the limit the service applies to one request descriptor ("k=v,k2=v2") under a file's domain.
func lookup(file string, domain string, entries string) {
	text, _ := ioutil.ReadFile(file)
	root := config.ConfigFileContentToYaml(file, string(text))
	cfg := config.NewRateLimitConfigLoaderImpl().Load(
		[]config.RateLimitConfigToLoad{{Name: file, ConfigYaml: root}}, stats.Nothing{}, false)
	descriptor := &pb_struct.RateLimitDescriptor{}
	for _, kv := range strings.Split(entries, ",") {
		parts := strings.SplitN(kv, "=", 2)
		descriptor.Entries = append(descriptor.Entries, &pb_struct.RateLimitDescriptor_Entry{Key: parts[0], Value: parts[1]})
	}
	limit := cfg.GetLimit(context.Background(), domain, descriptor)
	out := map[string]interface{}{"descriptor": entries, "limit": nil}
	if limit != nil {
		out["limit"] = map[string]interface{}{"key": limit.FullKey, "requests_per_unit": limit.Limit.RequestsPerUnit,
			"unit": limit.Limit.Unit.String(), "unlimited": limit.Unlimited, "shadow": limit.ShadowMode}
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--lookup" {
		for _, entries := range os.Args[4:] {
			lookup(os.Args[2], os.Args[3], entries)
		}
		return
	}
	for _, file := range os.Args[1:] {
		line, _ := json.Marshal(verdict(file))
		fmt.Println(string(line))
	}
}
