package rlclient

// RaceEnabled lets the external tests skip timing assertions under -race.
const RaceEnabled = raceEnabled
