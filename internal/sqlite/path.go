package sqlite

// Path returns the file the store is on, for another handle on the same
// database (a test standing for another process).
func (s *Store) Path() string { return s.path }
