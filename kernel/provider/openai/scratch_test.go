package openai

import (
	"encoding/json"
	"fmt"
	"testing"

	oa "github.com/openai/openai-go/v3"
)

func TestScratch(t *testing.T) {
	for _, s := range []string{
		`{"choices":"x"}`,
		`{"choices":[{"index":0,"delta":{"content":5,"reasoning_content":"hi \u00e9\n","tool_calls":[{"index":"a","function":{"arguments":7}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"content":null,"reasoning":null}}],"usage":null}`,
		`[1,2]`,
		`"str"`,
		`null`,
		`{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"a"}}]}}]}`,
	} {
		var c oa.ChatCompletionChunk
		err := json.Unmarshal([]byte(s), &c)
		fmt.Printf("%s\n  err=%v\n", s, err)
		if err == nil && len(c.Choices) > 0 {
			d := c.Choices[0].Delta
			fmt.Printf("  content=%q valid=%v raw=%q extra=%v\n", d.Content, d.JSON.Content.Valid(), d.JSON.Content.Raw(), d.JSON.ExtraFields)
			for k, v := range d.JSON.ExtraFields {
				fmt.Printf("  extra %s raw=%q valid=%v\n", k, v.Raw(), v.Valid())
			}
			for _, tc := range d.ToolCalls {
				fmt.Printf("  tc idx=%d valid=%v raw=%q args=%q argsvalid=%v\n", tc.Index, tc.JSON.Index.Valid(), tc.JSON.Index.Raw(), tc.Function.Arguments, tc.Function.JSON.Arguments.Valid())
			}
			fmt.Printf("  usage valid=%v raw=%q\n", c.JSON.Usage.Valid(), c.JSON.Usage.Raw())
		}
	}
	var e oa.Error
	fmt.Println("empty err unmarshal:", e.UnmarshalJSON([]byte("")))
	fmt.Println("num code:", e.UnmarshalJSON([]byte(`{"code":400,"message":"m"}`)), e.Code, e.JSON.Code.Raw())
}
