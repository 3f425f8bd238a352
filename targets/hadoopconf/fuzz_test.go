package hadoopconf

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, refuses what exceeds its bounds, and an
// error names the file and stays short.
func FuzzParse(f *testing.F) {
	f.Add(string(xmlConf("fs.defaultFS", "hdfs://nn:8020", "a", "${a}${a}")))
	f.Add(`<?xml version="1.0"?><!DOCTYPE c [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><configuration><property><name>x</name><value>&b;</value></property></configuration>`)
	f.Add("<configuration>" + strings.Repeat("<x>", 40) + strings.Repeat("</x>", 40) + "</configuration>")
	f.Add(`<configuration><property><name> </name></property></configuration>`)
	f.Add(`<configuration><property><name>a</name><name>b</name><value>&lt;&amp;</value></property></configuration>`)
	f.Add(`<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="/etc/passwd"/></configuration>`)
	f.Fuzz(func(t *testing.T, data string) {
		c, err := Parse("f.xml", []byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.xml: ") || len(err.Error()) > 300 {
				t.Fatalf("error %q", err)
			}
			return
		}
		if len(c) > MaxProperties {
			t.Fatalf("%d properties", len(c))
		}
	})
}

// substituteVars is Hadoop's Configuration.substituteVars, written with
// the regular expression its hand-written scanner stands for.
func substituteVars(c Conf, expr string) (string, bool) {
	re := regexp.MustCompile(`\$\{[^\}\$ ]+\}`)
	eval := expr
	for s := 0; s < MaxSubst; s++ {
		loc := re.FindStringIndex(eval)
		if loc == nil {
			return eval, true
		}
		ref := eval[loc[0]+2 : loc[1]-1]
		val, ok := c.lookup(ref)
		if !ok {
			return eval, true
		}
		if strings.Contains(val, eval[loc[0]:loc[1]]) {
			return expr, true
		}
		eval = eval[:loc[0]] + val + eval[loc[1]:]
		if len(eval) > MaxExpandedLen {
			return "", false
		}
	}
	return "", false
}

// FuzzExpand: Get and Expand agree with Hadoop's algorithm on
// configurations of up to four properties, never panic and never return a
// value longer than the bound.
func FuzzExpand(f *testing.F) {
	f.Add("${a}${a}${a}${a}${a}${a}${a}${a}${a}${a}", "${b}${b}${b}${b}${b}${b}${b}${b}${b}${b}", "${c}${c}${c}${c}${c}${c}${c}${c}${c}${c}", "xxxxxxxxxx")
	f.Add("hdfs://${b}:${c}", "nn", "8020", "")
	f.Add("${d}", "${a}", "x${b}", "${c}")
	f.Add("$${b}", "${ b}${c", "${}${d}", "${env.HOME:-x}${env.CELOS_NOPE-y}")
	f.Add("${a}", "${b}x", "${nope}${a}", "${d{}")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		conf := Conf{"a": a, "b": b, "c": c, "d": d}
		for _, k := range []string{"a", "b", "c", "d"} {
			got, err := conf.Expand(k)
			want, ok := substituteVars(conf, conf[k])
			if ok != (err == nil) || ok && got != want {
				t.Fatalf("Expand(%s) = %.200q, %v; Hadoop: %.200q, %v", k, got, err, want, ok)
			}
			if g := conf.Get(k); len(g) > MaxExpandedLen && g != conf[k] {
				t.Fatalf("Get(%s): %d bytes", k, len(g))
			}
		}
	})
}
