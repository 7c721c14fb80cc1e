// Command outbox is oncehook's outbox Lambda, on the table's stream and the retry queue, with
// the sources file's HTTP targets; the environment is launch's.
package main

import "github.com/oncehook/oncehook/launch"

func main() { launch.Outbox(nil) }
