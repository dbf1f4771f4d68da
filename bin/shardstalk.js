#!/usr/bin/env node
// Runs the TypeScript entry directly (Node >= 24 strips the types; see README "Why no build step").
import '../src/main.ts';
