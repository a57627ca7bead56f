"""kvops.doctor"""
