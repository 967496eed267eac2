// How gopkg.in/yaml.v2 reads a ratelimit service configuration, for scripts/yaml-v2-check.ts: the untyped pass the
// service makes first (a key that is not text, a list of something other than mappings, a float outside metadata:
// refused), then the typed pass into structs with the service's field names and types. Prints one JSON line.
// Build by hand (Debian: apt-get install golang-go golang-gopkg-yaml.v2-dev), as scripts/yaml-v2-check.ts says.
package main

import (
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"

	yaml "gopkg.in/yaml.v2"
)

type replaces struct {
	Name string `json:"name"`
}

type rateLimit struct {
	RequestsPerUnit uint32     `yaml:"requests_per_unit" json:"requests_per_unit"`
	Unit            string     `json:"unit"`
	Unlimited       bool       `yaml:"unlimited" json:"unlimited"`
	Name            string     `json:"name"`
	Replaces        []replaces `json:"replaces"`
}

type descriptor struct {
	Key            string                 `json:"key"`
	Value          string                 `json:"value"`
	RateLimit      *rateLimit             `yaml:"rate_limit" json:"rate_limit"`
	Descriptors    []descriptor           `json:"descriptors"`
	ShadowMode     bool                   `yaml:"shadow_mode" json:"shadow_mode"`
	QuotaMode      bool                   `yaml:"quota_mode" json:"quota_mode"`
	DetailedMetric bool                   `yaml:"detailed_metric" json:"detailed_metric"`
	ValueToMetric  bool                   `yaml:"value_to_metric" json:"value_to_metric"`
	ShareThreshold bool                   `yaml:"share_threshold" json:"share_threshold"`
	Metadata       map[string]interface{} `json:"-"`
}

type root struct {
	Domain      string       `json:"domain"`
	Descriptors []descriptor `json:"descriptors"`
}

func refuse(why string) {
	out, _ := json.Marshal(map[string]string{"verdict": "refuse", "why": why})
	fmt.Println(string(out))
	os.Exit(0)
}

func leaves(m map[interface{}]interface{}) {
	for k, v := range m {
		name, ok := k.(string)
		if !ok {
			refuse(fmt.Sprintf("key is not of type string: %v", k))
		}
		if name == "metadata" {
			continue
		}
		switch t := v.(type) {
		case []interface{}:
			for _, e := range t {
				inner, ok := e.(map[interface{}]interface{})
				if !ok {
					refuse(fmt.Sprintf("list of type other than map: %v", e))
				}
				leaves(inner)
			}
		case map[interface{}]interface{}:
			leaves(t)
		case string, int, bool, nil:
		default:
			refuse(fmt.Sprintf("%s: a leaf of type %T", name, v))
		}
	}
}

func main() {
	text, err := ioutil.ReadFile(os.Args[1])
	if err != nil {
		refuse(err.Error())
	}
	untyped := map[interface{}]interface{}{}
	if err := yaml.Unmarshal(text, &untyped); err != nil {
		refuse(err.Error())
	}
	leaves(untyped)
	var typed root
	if err := yaml.Unmarshal(text, &typed); err != nil {
		refuse(err.Error())
	}
	out, _ := json.Marshal(map[string]interface{}{"verdict": "accept", "root": typed})
	fmt.Println(string(out))
}
