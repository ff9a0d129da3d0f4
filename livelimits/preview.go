package livelimits

// Preview returns the overlay as it would be if ch were stored at key and
// every other change stayed as it is: what a change would do, shown before
// it is made. It changes nothing. Safe for concurrent use.
func (c *Cache) Preview(key string, ch Change) Overlay {
	c.mu.Lock()
	defer c.mu.Unlock()
	saved, had := c.good[key]
	c.good[key] = ch
	ov := c.computeLocked(c.cfg.Now())
	if had {
		c.good[key] = saved
	} else {
		delete(c.good, key)
	}
	return ov
}
