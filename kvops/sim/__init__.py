"""kvops.sim"""
