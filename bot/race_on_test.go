//go:build race

package bot

// raceDetector reports whether the tests run with the race detector (make
// test does), which makes them several times slower.
const raceDetector = true
