"""Bundled simulator scenarios (JSON). Installed as the fleet_agent.scenarios package."""
