"""kvops.top"""
