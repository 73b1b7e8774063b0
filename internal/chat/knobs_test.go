package chat

import "time"

// The configuration knobs of the account tests, apart so that the tests
// themselves speak only the protocol.

// passwordMode is --auth password.
func passwordMode(c *Config) { c.Auth = AuthPassword }

// addressThrottle throttles an address after two failed logins, for a
// second at first.
func addressThrottle(c *Config) {
	c.Throttle.AddressFree = 2
	c.Throttle.Base = time.Second
}
