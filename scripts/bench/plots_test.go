package main

import "testing"

// Every phase the tool runs has a title for its plots and captions.
func TestEveryPhaseHasATitle(t *testing.T) {
	for _, ph := range allPhases {
		if phaseTitles[ph] == "" {
			t.Errorf("phase %q has no title in phaseTitles", ph)
		}
	}
}
