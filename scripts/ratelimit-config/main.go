// The envoyproxy/ratelimit service's own configuration loader (its src/config, copied from a checkout at build time,
// never into this repository) run on each file named, for scripts/ratelimit-config-check.ts: prints one JSON line
// per file, the loader's verdict ("accept") or its panic's message ("refuse").
package main

import (
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"

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

func main() {
	for _, file := range os.Args[1:] {
		line, _ := json.Marshal(verdict(file))
		fmt.Println(string(line))
	}
}
