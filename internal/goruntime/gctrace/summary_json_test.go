package gctrace

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// A summary survives a JSON round trip, to the microsecond JSON keeps.
func TestSummaryJSONRoundTrip(t *testing.T) {
	f, err := os.Open("testdata/go1.26.8.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize("go1.26", l, 12345)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(data) {
		t.Errorf("round trip changed the JSON:\n%s\n%s", data, again)
	}
	if back.Collections != s.Collections || back.STW.Round(1000) != s.STW.Round(1000) || !reflect.DeepEqual(back.HeapBefore, s.HeapBefore) {
		t.Errorf("round trip: %+v\nwant %+v", back, s)
	}
}
