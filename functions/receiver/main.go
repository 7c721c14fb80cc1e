// Command receiver is oncehook's receiver Lambda with no application planners: every event is
// verified, deduplicated and claimed, with nothing to run. An application's receiver is the
// same call with its planners (launch.Receiver(myapp.Register)); examples/orders/cmd/receiver
// is the reference application's. The environment is launch's.
package main

import "github.com/oncehook/oncehook/launch"

func main() { launch.Receiver(nil) }
