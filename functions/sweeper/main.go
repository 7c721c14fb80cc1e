// Command sweeper is oncehook's scheduled sweeper Lambda, with the sources file's HTTP
// targets; the environment is launch's.
package main

import "github.com/oncehook/oncehook/launch"

func main() { launch.Sweeper(nil) }
