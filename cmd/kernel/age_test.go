package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "12h", want: 12 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "0d", bad: true},
		{in: "-3d", bad: true},
		{in: "1.5d", bad: true},
		{in: "d", bad: true},
		{in: "30", bad: true},
		{in: "-1h", bad: true},
		{in: "", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseAge(tc.in)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
					t.Fatalf("parseAge(%q) = %v, %v; want an error naming the input", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseAge(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
