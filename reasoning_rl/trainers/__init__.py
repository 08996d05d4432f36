"""Trainers: readable loops that compose rollouts, verifiers, curricula, advantages and losses."""
