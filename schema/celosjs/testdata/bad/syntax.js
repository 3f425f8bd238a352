celos.defineWorkflow({
    "id": "broken",
    "schedule": celos.hourlySchedule(
});
