package session

// envChange says what changed between the environment a checkpoint was
// made in (its ID, "" when it recorded none) and this replica's.
func (m *Manager) envChange(from string) string {
	if m.cfg.Durable == nil || m.cfg.Durable.EnvChange == nil || from == "" {
		return ""
	}
	return m.cfg.Durable.EnvChange(from)
}
